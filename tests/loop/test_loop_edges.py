"""Loop edges found by the issue-37 probes (turn-loop.md, "Loop edges"): one section per rule."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from fastagg import events
from fastagg.limits import StopReason
from fastagg.testing.chunks import call, chunk, signature
from fastagg.tools import Tool
from scripted_model import (
    Reply,
    ScriptedModel,
    assert_replayable,
    calls,
    turn,
)

TESTS = Path(__file__).resolve().parent.parent


def responses(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in request["contents"][-1]["parts"]]


# -- L81: an abort before a tool starts -------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_l81_abort_set_in_a_tool_call_start_handler_runs_no_tool(kind: str) -> None:
    ran = threading.Event()

    def send_sync(to: str) -> str:
        ran.set()
        return "sent"

    async def send_async(to: str) -> str:
        ran.set()
        return "sent"

    abort = asyncio.Event()
    seen: list[Any] = []

    def on_event(event: Any) -> None:
        seen.append(event)
        if isinstance(event, events.ToolCallStart):
            abort.set()  # synchronously: the watcher task has not run yet

    fn = send_sync if kind == "sync" else send_async
    model = ScriptedModel(calls(("send", {"to": "bob"}), seed="a"))
    result = await turn(model, tools=[Tool("send", fn)], abort=abort, on_event=on_event)
    assert result.stop_reason is StopReason.ABORTED
    assert result.tool_call_count == 0
    assert result.contents[-1] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "a-0", "name": "send", "response": {"error": "aborted"}}}
        ],
    }
    ends = [(e.name, e.status) for e in seen if isinstance(e, events.ToolCallEnd)]
    assert ends == [("send", "aborted")]
    # a sync tool would have been handed to a thread: give one every chance to show up
    assert not await asyncio.to_thread(ran.wait, 0.5)
    assert_replayable(result.contents)


async def test_l81_abort_set_in_a_duplicate_call_id_handler_runs_no_tool() -> None:
    ran: list[str] = []

    async def lookup(q: str) -> str:
        ran.append(q)
        return q.upper()

    abort = asyncio.Event()

    def on_event(event: Any) -> None:
        if isinstance(event, events.Lifecycle) and event.phase == "duplicate-call-id":
            abort.set()

    # two calls under one id with different arguments: both would run (L39)
    step = Reply(
        [
            chunk(
                call("lookup", {"q": "a"}, id="same", signature=signature("d")),
                call("lookup", {"q": "b"}, id="same"),
                finish_reason="STOP",
            )
        ]
    )
    model = ScriptedModel(step)
    result = await turn(model, tools=[lookup], abort=abort, on_event=on_event)
    assert result.stop_reason is StopReason.ABORTED
    assert ran == []
    assert [p["functionResponse"]["response"] for p in result.contents[-1]["parts"]] == [
        {"error": "aborted"},
        {"error": "aborted"},
    ]
    assert result.tool_call_count == 0
