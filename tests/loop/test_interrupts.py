"""Turn loop: interrupts while an event handler is awaited, bounded waits (turn-loop.md L42-L44)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from fastagg import events
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import WRAPUP_NOTE, run_turn
from fastagg.testing.chunks import chunk, text
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

ABORTED = {"error": "aborted"}


async def lookup(q: str) -> str:
    return f"found {q}"


def last_responses(contents: list[dict[str, Any]]) -> list[Any]:
    assert contents[-1]["role"] == "user"
    return [p["functionResponse"] for p in contents[-1]["parts"] if "functionResponse" in p]


@pytest.mark.parametrize("cause", ["aborted", "stalled", "time-limit"])
async def test_l42_interrupt_while_tool_call_start_is_awaited_answers_every_call(
    cause: str,
) -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), seed="t"))
    limits = {
        "aborted": TurnLimits(),
        "stalled": TurnLimits(stall_timeout=0.05),
        "time-limit": TurnLimits(turn_timeout=0.2),
    }[cause]

    async def handler(event: events.TurnEvent) -> None:
        if isinstance(event, events.ToolCallStart) and event.index == 1:
            if cause == "aborted":
                abort.set()
            await asyncio.Event().wait()  # the handler hangs: only the interrupt ends it

    result = await turn(model, tools=[lookup], abort=abort, limits=limits, on_event=handler)
    assert result.stop_reason.value == cause
    assert last_responses(result.contents) == [
        {"id": "t-0", "name": "lookup", "response": ABORTED},
        {"id": "t-1", "name": "lookup", "response": ABORTED},
    ]
    assert result.tool_call_count == 0
    assert_replayable(result.contents)


async def test_l42_abort_while_wrapup_lifecycle_is_awaited_keeps_the_tool_results() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), seed="w"))

    async def handler(event: events.TurnEvent) -> None:
        if isinstance(event, events.Lifecycle) and event.phase == "wrapup":
            abort.set()
            await asyncio.Event().wait()

    result = await turn(
        model,
        tools=[lookup],
        abort=abort,
        limits=TurnLimits(turn_timeout=100.0, wrapup_lead=1000.0),
        on_event=handler,
    )
    assert result.stop_reason is StopReason.ABORTED
    assert last_responses(result.contents) == [
        {"id": "w-0", "name": "lookup", "response": {"output": "found a"}},
        {"id": "w-1", "name": "lookup", "response": {"output": "found b"}},
    ]
    nudge = result.contents[-1]["parts"][-1]["text"]
    assert nudge.startswith(WRAPUP_NOTE.split("{", 1)[0])
    assert result.tool_call_count == 2
    assert_replayable(result.contents)


async def test_l42_abort_while_an_aborted_tool_call_end_is_awaited_keeps_the_transcript() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), seed="e"))
    ends: list[events.ToolCallEnd] = []

    async def handler(event: events.TurnEvent) -> None:
        if isinstance(event, events.ToolCallStart) and event.index == 1:
            abort.set()
            await asyncio.sleep(0)
        if isinstance(event, events.ToolCallEnd):
            ends.append(event)

    result = await turn(model, tools=[lookup], abort=abort, on_event=handler)
    assert result.stop_reason is StopReason.ABORTED
    assert [(e.index, e.status) for e in ends] == [(0, "aborted"), (1, "aborted")]
    assert [r["response"] for r in last_responses(result.contents)] == [ABORTED, ABORTED]


async def test_l43_abort_set_by_a_sync_step_start_handler_sends_no_request() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(answer("Hi."))

    def handler(event: events.TurnEvent) -> None:
        if isinstance(event, events.StepStart):
            abort.set()

    result = await turn(model, abort=abort, on_event=handler)
    assert result.stop_reason is StopReason.ABORTED
    assert model.requests == []
    assert result.usage_by_step == []


async def test_l43_abort_set_by_a_sync_handler_before_the_second_step_sends_one_request() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("lookup", {"q": "a"}), seed="s"), answer("Done."))

    def handler(event: events.TurnEvent) -> None:
        if isinstance(event, events.StepStart) and event.step == 2:
            abort.set()

    result = await turn(model, tools=[lookup], abort=abort, on_event=handler)
    assert result.stop_reason is StopReason.ABORTED
    assert len(model.requests) == 1
    assert last_responses(result.contents) == [
        {"id": "s-0", "name": "lookup", "response": {"output": "found a"}}
    ]
    assert_replayable(result.contents)


@pytest.mark.parametrize("delay", [301.0, 1e9, math.inf])
async def test_l44_a_huge_retry_after_without_a_deadline_ends_the_turn_at_once(
    delay: float,
) -> None:
    quota = ProviderError(429, "RESOURCE_EXHAUSTED", "quota", True, retry_after=delay)
    model = ScriptedModel(Reply(error=quota), answer("never"))
    # Before L44 the turn slept for `delay`: the bound makes that a failure, not a hang.
    result = await asyncio.wait_for(
        run_turn(model, list(USER), limits=TurnLimits(turn_timeout=math.inf)), timeout=10
    )
    assert pending_tasks() == []
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is quota
    assert len(model.requests) == 1


async def test_l44_a_retry_after_within_the_bound_is_honoured() -> None:
    quota = ProviderError(429, "RESOURCE_EXHAUSTED", "quota", True, retry_after=0.01)
    model = ScriptedModel(Reply(error=quota), answer("Hi."))
    result = await turn(model, limits=TurnLimits(turn_timeout=math.inf))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.retries["provider"] == 1


async def test_d5_a_last_event_without_a_blank_line_is_delivered_live() -> None:
    last = (
        b'data: {"candidates":[{"content":{"parts":[{"text":" world."}]},"finishReason":"STOP"}]}'
    )
    model = ScriptedModel(Reply([chunk(text("Hello"))], raw=last))
    seen: list[Any] = []
    result = await turn(model, on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    assert [e.text for e in seen if isinstance(e, events.AnswerDelta)] == ["Hello", " world."]
    assert result.text == "Hello world."
