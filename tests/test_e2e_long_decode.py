"""Long decode's limits and interruptions, end to end over loopback HTTP against FakeGemini
(spec/turn-loop.md L59-L61, L63): the hop cap, the resume limit, abort and deadline in a hop."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastagg import GeminiClient
from fastagg.events import Lifecycle, StepEnd, TextDelta
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, Step
from fastagg.testing.chunks import chunk, text, usage

USER = [{"role": "user", "parts": [{"text": "Write the manual."}]}]


def client(server: FakeGemini) -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url)


def hop(n: int) -> Step:
    """Hop ``n`` of an answer that never ends: its text, then CONTINUATION with token t{n}."""
    return Step(
        chunks=[
            chunk(
                text(f"<{n}>"),
                finish_reason="CONTINUATION",
                continuation_token=f"t{n}",
                usage=usage(10, 2),
            )
        ]
    )


def phases(events: list[Any]) -> list[str]:
    return [e.phase for e in events if isinstance(e, Lifecycle)]


async def test_l61_hop_cap_classifies_the_64th_hop_as_it_is() -> None:
    events: list[Any] = []
    async with FakeGemini([hop(n) for n in range(1, 66)]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        tokens = [b.get("continuationToken") for b in server.requests]
    assert tokens == [None, *(f"t{n}" for n in range(1, 64))]
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.COMPLETED,
        "length",
        "CONTINUATION",
    )
    assert result.hops == 63
    assert result.text == "".join(f"<{n}>" for n in range(1, 65))
    assert result.usage == {
        "promptTokenCount": 640,
        "candidatesTokenCount": 128,
        "totalTokenCount": 768,
    }
    assert len(result.usage_by_step) == 64
    assert phases(events) == ["continuation"] * 63
    details = [e.detail for e in events if isinstance(e, Lifecycle)]
    assert (details[0], details[-1]) == ("L56: hop 2 of step 1", "L56: hop 64 of step 1")


def dropped(n: int) -> Step:
    """Resumed attempt ``n``: its text with checkpoint c{n}, then the connection drops."""
    return Step(
        chunks=[chunk(text(f"[{n}]"), continuation_token=f"c{n}", usage=usage(10, n))],
        drop_after=1,
    )


async def test_l59_three_resumes_per_hop_then_the_drop_is_a_truncation() -> None:
    events: list[Any] = []
    limits = TurnLimits(provider_retries=0)
    async with FakeGemini([dropped(n) for n in range(1, 6)]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits, on_event=events.append)
        tokens = [b.get("continuationToken") for b in server.requests]
    assert tokens == [None, "c1", "c2", "c3"]
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.kind == "connection"
    assert (result.hops, len(result.usage_by_step)) == (0, 4)
    assert result.text == f"[1][2][3][4]\n\n{result.message}"
    resumes = [e.detail for e in events if isinstance(e, Lifecycle)][:3]
    cause = result.error.message
    assert resumes == [f"L59: resume {n} of 3 after CONNECTION: {cause}" for n in (1, 2, 3)]
    assert phases(events) == ["continuation-resume"] * 3 + ["provider-error"]


async def test_l59_resume_count_starts_again_at_each_hop() -> None:
    script = [
        dropped(1),
        dropped(2),
        dropped(3),
        Step(chunks=[chunk(text("[4]"), finish_reason="CONTINUATION", continuation_token="h1")]),
        dropped(5),
        Step(chunks=[chunk(text("[6]"), finish_reason="STOP", usage=usage(10, 6))]),
    ]
    async with FakeGemini(script) as server, client(server) as model:
        result = await run_turn(model, USER, limits=TurnLimits(provider_retries=0))
        tokens = [b.get("continuationToken") for b in server.requests]
    assert tokens == [None, "c1", "c2", "c3", "h1", "c5"]
    assert (result.stop_reason, result.text, result.hops) == (
        StopReason.COMPLETED,
        "[1][2][3][4][5][6]",
        1,
    )


FIRST = Step(
    chunks=[
        chunk(
            text("one "), finish_reason="CONTINUATION", continuation_token="h1", usage=usage(7, 3)
        )
    ]
)
# The second hop sends one chunk, then waits until the client goes away.
HANGING = Step(
    chunks=[chunk(text("two"), usage=usage(9, 1)), chunk(text(" never"))],
    pause_after=1,
    pause=math.inf,
)


async def test_l63_abort_in_a_later_hop_keeps_every_hop_s_text_and_usage() -> None:
    abort = asyncio.Event()
    events: list[Any] = []

    def sink(event: Any) -> None:
        events.append(event)
        if isinstance(event, TextDelta) and event.text == "two":
            abort.set()

    async with FakeGemini([FIRST, HANGING]) as server, client(server) as model:
        result = await run_turn(model, USER, abort=abort, on_event=sink)
        sent = len(server.requests)
    assert (result.stop_reason, result.finish_reason, result.hops, sent) == (
        StopReason.ABORTED,
        None,
        1,
        2,
    )
    assert result.text == f"one two\n\n{result.message}"
    assert result.contents == USER  # L20: nothing of the cut-off step is appended
    assert result.usage_by_step == [usage(7, 3), usage(9, 1)]
    ends = [(e.raw_finish_reason, e.outcome) for e in events if isinstance(e, StepEnd)]
    assert ends == [(None, "interrupted")]


async def test_l60_abort_before_a_hop_sends_no_hop() -> None:
    abort = asyncio.Event()
    events: list[Any] = []

    def sink(event: Any) -> None:
        events.append(event)
        if isinstance(event, Lifecycle) and event.phase == "continuation":
            abort.set()  # a synchronous handler: the watcher task has not run yet (L43)

    async with FakeGemini([FIRST, HANGING]) as server, client(server) as model:
        result = await run_turn(model, USER, abort=abort, on_event=sink)
        sent = len(server.requests)
    assert (result.stop_reason, result.hops, sent) == (StopReason.ABORTED, 0, 1)
    assert result.text == f"one \n\n{result.message}"
    assert result.usage_by_step == [usage(7, 3)]
    ends = [(e.raw_finish_reason, e.outcome) for e in events if isinstance(e, StepEnd)]
    assert (ends, result.raw_finish_reason) == ([("CONTINUATION", "interrupted")], "CONTINUATION")


async def test_l63_deadline_in_a_later_hop_is_the_time_limit() -> None:
    # hop 1 and hop 2's first chunk come at once; 1.5 s leaves a loaded machine room for both
    limits = TurnLimits(turn_timeout=1.5)
    async with FakeGemini([FIRST, HANGING]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits)
        sent = len(server.requests)
    assert (result.stop_reason, result.finish_reason, result.hops, sent) == (
        StopReason.TIME_LIMIT,
        None,
        1,
        2,
    )
    assert result.text == f"one two\n\n{result.message}"
    assert result.usage == {
        "promptTokenCount": 16,
        "candidatesTokenCount": 4,
        "totalTokenCount": 20,
    }


# -- L60: each hop is progress and has its own first-output window ----------------------

PACE = 1.0  # one wait is well within the timeouts below (0.6 s of slack); two in a row are not
WINDOW = 1.6


def slow_hops() -> list[Step]:
    """Hop 1's body ends PACE after its chunk; hop 2's first byte comes PACE after it is sent."""
    return [
        Step(
            chunks=[chunk(text("one "), finish_reason="CONTINUATION", continuation_token="h1")],
            pause_after=1,
            pause=PACE,
        ),
        Step(chunks=[chunk(text("two"), finish_reason="STOP")], delay_first_byte=PACE),
    ]


async def test_l60_each_hop_restarts_the_stall_clock() -> None:
    # From hop 1's chunk to hop 2's is 2 * PACE > the stall timeout: only hop 2's start,
    # counted as progress, keeps the turn alive.
    limits = TurnLimits(stall_timeout=WINDOW)
    async with FakeGemini(slow_hops()) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits)
    assert (result.stop_reason, result.finish_reason, result.text, result.hops) == (
        StopReason.COMPLETED,
        "stop",
        "one two",
        1,
    )


async def test_l60_each_hop_gets_its_own_first_output_window() -> None:
    limits = TurnLimits(first_output_timeout=WINDOW)
    async with FakeGemini(slow_hops()) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits)
    assert (result.stop_reason, result.text, result.hops) == (StopReason.COMPLETED, "one two", 1)


async def test_l63_a_hop_that_stalls_ends_the_turn_stalled() -> None:
    events: list[Any] = []
    limits = TurnLimits(stall_timeout=WINDOW)
    async with FakeGemini([FIRST, HANGING]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits, on_event=events.append)
        sent = len(server.requests)
    assert (result.stop_reason, result.finish_reason, result.hops, sent) == (
        StopReason.STALLED,
        None,
        1,
        2,
    )
    assert result.text == f"one two\n\n{result.message}"
    assert (result.contents, result.usage_by_step) == (USER, [usage(7, 3), usage(9, 1)])
    ends = [(e.raw_finish_reason, e.outcome) for e in events if isinstance(e, StepEnd)]
    assert ends == [(None, "interrupted")]


async def test_l63_a_hop_whose_first_byte_is_late_ends_the_turn_stalled() -> None:
    late = Step(chunks=[chunk(text("two"), finish_reason="STOP")], delay_first_byte=math.inf)
    limits = TurnLimits(first_output_timeout=WINDOW)
    async with FakeGemini([FIRST, late]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=limits)
        sent = len(server.requests)
    assert (result.stop_reason, result.hops, sent) == (StopReason.STALLED, 1, 2)
    assert result.text == f"one \n\n{result.message}"
    assert result.usage_by_step == [usage(7, 3), {}]
