"""Long decode's limits and interruptions, end to end over loopback HTTP against FakeGemini
(spec/turn-loop.md L59-L61, L63): the hop cap, the resume limit, abort and deadline in a hop."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastagg import GeminiClient
from fastagg.events import AnswerDelta, Lifecycle, StepEnd, ToolCallDelta, ToolCallStart
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, Step
from fastagg.testing.chunks import call, chunk, signature, text, usage

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
    assert (details[0], details[-1]) == (
        "the answer continues in hop 2 of step 1",
        "the answer continues in hop 64 of step 1",
    )


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
    assert resumes == [f"resume {n} of 3 after CONNECTION: {cause}" for n in (1, 2, 3)]
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
        if isinstance(event, AnswerDelta) and event.text == "two":
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


# -- L90, L91: a call split by a drop or a hop is one call ---------------------------------

SIG = signature("paris")
CITY = "Paris, Ile-de-France"
WEATHER_USER = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]


class Weather:
    """A ``get_weather`` tool that records every city it was run with."""

    def __init__(self) -> None:
        self.cities: list[str] = []

    def get_weather(self, city: str) -> str:
        """Current weather for a city."""
        self.cities.append(city)
        return "18 C, clear"


def fragment(value: str, *, more: bool) -> dict[str, Any]:
    """A streamed call's chunk part: a piece of ``$.city`` (``more``: the string goes on)."""
    arg: dict[str, Any] = {"jsonPath": "$.city", "stringValue": value}
    if more:
        arg["willContinue"] = True
    return {"functionCall": {"partialArgs": [arg], "willContinue": True}}


CALL_OPENS = chunk(call("get_weather", None, id="fc1", signature=SIG, will_continue=True))
# The call is open when the connection drops: "Paris, Ile" is covered by the checkpoint c1.
CUT_IN_THE_CALL = Step(
    chunks=[
        CALL_OPENS,
        chunk(fragment("Paris, Ile", more=True), continuation_token="c1", usage=usage(10, 3)),
    ],
    drop_after=2,
)
# The resumed stream carries on after c1: the rest of the string, the call's end, STOP.
CALL_FINISHED = Step(
    chunks=[
        chunk(fragment("-de-France", more=False)),
        chunk({"functionCall": {}}, finish_reason="STOP", usage=usage(13, 4)),
    ]
)
SUNNY = Step(chunks=[chunk(text("Sunny in Paris."), finish_reason="STOP", usage=usage(30, 4))])
WHOLE_CALL = {
    "functionCall": {"id": "fc1", "name": "get_weather", "args": {"city": CITY}},
    "thoughtSignature": SIG,
}


def call_deltas(events: list[Any]) -> list[tuple[int, str | None, str | None, Any]]:
    return [(e.part, e.name, e.json_path, e.value) for e in events if isinstance(e, ToolCallDelta)]


async def test_l90_a_resume_inside_a_streamed_call_finishes_that_call() -> None:
    weather = Weather()
    events: list[Any] = []
    script = [CUT_IN_THE_CALL, CALL_FINISHED, SUNNY]
    async with FakeGemini(script) as server, client(server) as model:
        result = await run_turn(
            model, WEATHER_USER, tools=[weather.get_weather], on_event=events.append
        )
        tokens = [b.get("continuationToken") for b in server.requests]
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "stop",
        "Sunny in Paris.",
    )
    assert (tokens, result.hops, result.tool_call_count) == ([None, "c1", None], 0, 1)
    assert result.contents[1] == {"role": "model", "parts": [WHOLE_CALL]}
    assert result.usage_by_step == [usage(10, 3), usage(13, 4), usage(30, 4)]
    assert phases(events) == ["continuation-resume"]
    # The resumed fragment is shown as a piece of the call the user saw start (L30).
    assert call_deltas(events) == [
        (0, "get_weather", None, None),
        (0, "get_weather", "$.city", "Paris, Ile"),
        (0, "get_weather", "$.city", "-de-France"),
    ]
    starts = [(e.id, e.name, e.args) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [("fc1", "get_weather", {"city": CITY})]


async def test_l91_a_resume_that_never_finishes_the_call_runs_no_tool() -> None:
    weather = Weather()
    events: list[Any] = []
    # The resumed stream answers in text and stops: the call stays cut at "Paris, Ile".
    no_call = Step(chunks=[chunk(text("It is sunny."), finish_reason="STOP")])
    retried = Step(
        chunks=[
            chunk(
                call("get_weather", {"city": CITY}, id="fc2", signature=SIG),
                finish_reason="STOP",
            )
        ]
    )
    script = [CUT_IN_THE_CALL, no_call, retried, SUNNY]
    async with FakeGemini(script) as server, client(server) as model:
        result = await run_turn(
            model, WEATHER_USER, tools=[weather.get_weather], on_event=events.append
        )
        tokens = [b.get("continuationToken") for b in server.requests]
    assert weather.cities == [CITY]  # only the retry's whole call ran
    assert (result.stop_reason, result.text, result.retries["malformed"]) == (
        StopReason.COMPLETED,
        "Sunny in Paris.",
        1,
    )
    assert tokens == [None, "c1", None, None]
    cut = "the stream ended inside the call 'get_weather' (part 0); it was not run"
    lifecycle = [(e.phase, e.detail) for e in events if isinstance(e, Lifecycle)]
    assert [p for p, _ in lifecycle] == ["continuation-resume", "malformed-retry"]
    assert lifecycle[1][1] == cut
    ends = [(e.raw_finish_reason, e.outcome) for e in events if isinstance(e, StepEnd)]
    assert ends == [("STOP", "malformed"), ("STOP", "tool-calls"), ("STOP", "answer")]


async def test_l91_a_resume_that_never_finishes_the_call_is_reported_when_retries_run_out() -> None:
    weather = Weather()
    no_call = Step(chunks=[chunk(text("It is sunny."), finish_reason="STOP")])
    limits = TurnLimits(malformed_retries=0)
    async with FakeGemini([CUT_IN_THE_CALL, no_call]) as server, client(server) as model:
        result = await run_turn(model, WEATHER_USER, tools=[weather.get_weather], limits=limits)
    assert weather.cities == []
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None
    assert (result.error.kind, result.error.code) == ("malformed", "UNFINISHED_FUNCTION_CALL")
    assert result.contents == WEATHER_USER


async def test_l90_a_call_open_at_the_end_of_a_hop_is_finished_by_the_next_hop() -> None:
    weather = Weather()
    events: list[Any] = []
    hop_1 = Step(
        chunks=[
            CALL_OPENS,
            chunk(
                fragment("Paris, Ile", more=True),
                finish_reason="CONTINUATION",
                continuation_token="h1",
                usage=usage(10, 3),
            ),
        ]
    )
    script = [hop_1, CALL_FINISHED, SUNNY]
    async with FakeGemini(script) as server, client(server) as model:
        result = await run_turn(
            model, WEATHER_USER, tools=[weather.get_weather], on_event=events.append
        )
        tokens = [b.get("continuationToken") for b in server.requests]
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.hops, tokens) == (
        StopReason.COMPLETED,
        1,
        [None, "h1", None],
    )
    assert result.contents[1] == {"role": "model", "parts": [WHOLE_CALL]}
    assert phases(events) == ["continuation"]
