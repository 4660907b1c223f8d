"""The fault x abort-timing sweep over loopback HTTP (turn-loop.md L6, L14, L21, L42, L43).

Every FakeGemini fault is combined with an abort at every moment of a turn:
before it starts, at the first byte, mid-stream, mid-tool, in a retry wait,
between steps, and while an awaited event handler runs. Each turn must end
within its budget (a turn that does not is a failure of ``wait_for``, not a
measured time), with a documented stop reason and message, with no pending
task, no request sent after the abort, every call answered (the transcript
plus a new user message passes ``check_request``), and no request that ended
with a model turn.
"""

from __future__ import annotations

import asyncio

import pytest

from fastagg import events
from fastagg.client import GeminiClient
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.request import check_request
from fastagg.testing import (
    FakeGemini,
    Step,
    call,
    chunk,
    error_chunk,
    final,
    malformed_call,
    signature,
    text,
    thought,
    usage,
)

USER = {"role": "user", "parts": [{"text": "Compare the weather in Paris and London."}]}
CALLS = [
    chunk(thought("I should look both up.")),
    chunk(text("Let me check. ")),
    chunk(
        call("lookup", {"q": "Paris"}, id="c-0", signature=signature("step 1")),
        call("lookup", {"q": "London"}, id="c-1"),
        finish_reason="STOP",
        usage=usage(20, 6),
    ),
]
ANSWER = [
    chunk(text("Paris is ")),
    chunk(text("sunny.")),
    final(signature("answer"), usage=usage(40, 3)),
]

FAULTS: dict[str, list[Step]] = {
    "none": [Step(CALLS), Step(ANSWER)],
    "delay-first-byte": [Step(CALLS, delay_first_byte=0.02), Step(ANSWER)],
    "pause-after-chunk": [Step(CALLS, pause_after=1, pause=0.02), Step(ANSWER)],
    "tiny-writes": [Step(CALLS, tiny_writes=9), Step(ANSWER, tiny_writes=5)],
    "in-stream-error": [
        Step([chunk(thought("Thinking.")), error_chunk()]),
        Step(CALLS),
        Step(ANSWER),
    ],
    "http-429": [Step(http_error=429, retry_after=0.02), Step(CALLS), Step(ANSWER)],
    "http-503": [Step(http_error=503, retry_delay="0.02s"), Step(CALLS), Step(ANSWER)],
    "malformed-call": [Step([malformed_call()]), Step(CALLS), Step(ANSWER)],
    "dropped-connection": [Step(CALLS, drop_after=1), Step(CALLS), Step(ANSWER)],
}
TIMINGS = [
    "before-start",
    "first-byte",
    "mid-stream",
    "mid-tool",
    "retry-wait",
    "between-steps",
    "awaited-handler",
]
RETRY_PHASES = {"provider-retry", "no-finish-retry", "malformed-retry"}
STREAM_EVENTS = (events.AnswerDelta, events.ThoughtDelta, events.ToolCallDelta)
LIMITS = TurnLimits(
    max_steps=4,
    turn_timeout=5.0,
    stall_timeout=2.0,
    wrapup_lead=0,
    retry_backoff=0.01,
    max_retry_backoff=0.05,
)
ABORTED_MESSAGE = "This turn was stopped before I could finish. I completed {} before stopping."


@pytest.mark.parametrize("timing", TIMINGS)
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_l6_sweep_every_fault_and_abort_moment_leaves_a_replayable_transcript(
    fault: str, timing: str
) -> None:
    abort = asyncio.Event()
    sent_at_abort: list[int] = []
    streamed = 0

    async with (
        FakeGemini(FAULTS[fault]) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):

        def stop() -> None:
            if not abort.is_set():
                sent_at_abort.append(len(server.requests))
                abort.set()

        async def lookup(q: str) -> str:
            if timing == "mid-tool":
                stop()
                await asyncio.sleep(30)
            return f"{q}: sunny"

        async def handler(event: events.TurnEvent) -> None:
            nonlocal streamed
            if isinstance(event, STREAM_EVENTS):
                streamed += 1
                if (timing, streamed) in (("first-byte", 1), ("mid-stream", 2)):
                    stop()
            elif isinstance(event, events.Lifecycle) and event.phase in RETRY_PHASES:
                if timing == "retry-wait":
                    stop()
            elif isinstance(event, events.StepEnd) and event.step == 1:
                if timing == "between-steps":
                    stop()
            elif isinstance(event, events.ToolCallStart) and event.index == 1:
                if timing == "awaited-handler":
                    stop()
                    await asyncio.Event().wait()  # only the abort ends this handler

        if timing == "before-start":
            stop()
        result = await asyncio.wait_for(
            run_turn(model, [USER], tools=[lookup], limits=LIMITS, abort=abort, on_event=handler),
            timeout=LIMITS.turn_timeout + 5,
        )

    # L14: nothing the turn started is still pending (the server's own tasks ended with it)
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not current and not t.done()] == []
    # a documented stop reason and its message
    assert result.stop_reason in (StopReason.ABORTED, StopReason.COMPLETED)
    if result.stop_reason is StopReason.ABORTED:
        calls = (
            "1 tool call" if result.tool_call_count == 1 else f"{result.tool_call_count} tool calls"
        )
        assert result.message == ABORTED_MESSAGE.format(calls)
        assert abort.is_set()
    else:
        assert result.text == "Paris is sunny."
    # L6: no request after the abort; every request ended with a user turn and was accepted
    if sent_at_abort:
        assert len(server.requests) == sent_at_abort[0]
    for request in server.requests:
        assert request["contents"][-1]["role"] == "user"
    assert [r.status for r in server.records if r.rejection] == []
    # L42: every call answered, the transcript replayable with a new user message
    check_request({"contents": [*result.contents, {"role": "user", "parts": [{"text": "go on"}]}]})
    assert result.contents[-1]["role"] in ("user", "model")
