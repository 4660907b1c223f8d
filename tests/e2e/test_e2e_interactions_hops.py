"""The issue's "done when" turns on the Interactions API, and its hops' faults (an error event
in a hop, a missing [DONE]), end to end through run_turn over loopback HTTP against FakeGemini
(spec/interactions.md I22-I28, spec/turn-loop.md L56-L64)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastagg import GeminiClient
from fastagg.events import AnswerDelta, Lifecycle, StepEnd, ToolCallDelta, ToolCallStart
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn
from fastagg.testing.fake_interactions import (
    checkpoint_event,
    error_event,
    text_step,
    thought_step,
)
from interactions_turns import ANSWER, CALLS, get_weather

USER = [{"role": "user", "parts": [{"text": "Weather in Paris and London?"}]}]
INPUT = [{"type": "user_input", "content": [{"type": "text", "text": USER[0]["parts"][0]["text"]}]}]
FAST_RETRY = TurnLimits(retry_backoff=0.01, max_retry_backoff=0.02)


def client(server: FakeGemini) -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, api="interactions")


def bodies(server: FakeGemini) -> list[dict[str, Any]]:
    """The request bodies the Interactions endpoints got, without the turn-scoped tools."""
    records = server.interactions.records  # type: ignore[union-attr]
    return [{k: v for k, v in (r[3] or {}).items() if k != "tools"} for r in records]


def lifecycle(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.phase, e.detail) for e in events if isinstance(e, Lifecycle)]


def step_ends(events: list[Any]) -> list[tuple[str | None, str]]:
    return [(e.raw_finish_reason, e.outcome) for e in events if isinstance(e, StepEnd)]


def output_start(index: int, *pieces: str) -> list[dict[str, Any]]:
    """A ``model_output`` step's start and text deltas, without its ``step.stop``."""
    return text_step(index, *pieces)[:-1]


# -- done when: two parallel streamed calls, then the function results -----------------


async def test_i24_done_when_two_streamed_calls_then_their_results_exact() -> None:
    events: list[Any] = []
    async with FakeGemini([], interactions=[CALLS, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, tools=[get_weather], on_event=events.append)
        sent = bodies(server)
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.COMPLETED,
        "stop",
        "completed",
    )
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    assert (result.steps_used, result.tool_call_count, result.hops) == (2, 2, 0)
    assert result.usage_by_step == [CALLS.usage, ANSWER.usage]
    assert result.usage == {
        "total_input_tokens": 142,
        "total_output_tokens": 36,
        "total_tokens": 343,
    }
    assert step_ends(events) == [("requires_action", "tool-calls"), ("completed", "answer")]
    starts = [(e.id, e.name, e.args) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ("fc7k2m9q", "get_weather", {"city": "Paris"}),
        ("q3v8t1xz", "get_weather", {"city": "London"}),
    ]
    deltas = [(e.part, e.json_path, e.value) for e in events if isinstance(e, ToolCallDelta)]
    assert deltas == [
        (1, None, None),
        (1, "$.city", "Pa"),
        (1, "$.city", "ris"),
        (2, None, None),
        (2, "$.city", "Lon"),
        (2, "$.city", "don"),
    ]
    assert sent == [
        {"model": "gemini-3.8-flash", "input": INPUT, "stream": True},
        {
            "model": "gemini-3.8-flash",
            "previous_interaction_id": "v1_fake1",
            "input": [
                {
                    "type": "function_result",
                    "call_id": "fc7k2m9q",
                    "name": "get_weather",
                    "result": "18 C, clear",
                },
                {
                    "type": "function_result",
                    "call_id": "q3v8t1xz",
                    "name": "get_weather",
                    "result": "12 C, rain",
                },
            ],
            "stream": True,
        },
    ]


# -- done when: three hops, one dropped after a checkpoint -----------------------------

HOP_1 = InteractionTurn(
    text_step(0, "Chapter 1. "),
    status="requires_continuation",
    continuation_token="tok-1",
    usage={"total_input_tokens": 20, "total_output_tokens": 100},
)
HOP_3 = InteractionTurn(
    text_step(0, "Chapter 3."), usage={"total_input_tokens": 22, "total_output_tokens": 40}
)
HOP_2_USAGE = {"total_input_tokens": 21, "total_output_tokens": 90}
# Hop 2 streams "Chapter 2. " and a checkpoint, then drops (events: created, start, delta,
# checkpoint); served whole, it ends with the token of hop 3.
HOP_2_DROPPED = InteractionTurn(
    [
        *output_start(0, "Chapter 2. "),
        checkpoint_event("ck-2"),
        {"event_type": "step.stop", "index": 0},
    ],
    status="requires_continuation",
    continuation_token="tok-2",
    usage=HOP_2_USAGE,
    drop_after=4,
)
ANSWER_TEXT = "Chapter 1. Chapter 2. Chapter 3."


async def test_i26_done_when_stored_three_hops_one_dropped_after_a_checkpoint() -> None:
    events: list[Any] = []
    script = [HOP_1, HOP_2_DROPPED, HOP_3]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        records = server.interactions.records  # type: ignore[union-attr]
        sent = bodies(server)
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.COMPLETED,
        "stop",
        "completed",
    )
    assert (result.text, result.hops) == (ANSWER_TEXT, 2)
    assert [e.text for e in events if isinstance(e, AnswerDelta)] == [
        "Chapter 1. ",
        "Chapter 2. ",
        "Chapter 3.",
    ]
    # I26: the stored hop resumes by last_event_id into the same aggregate: its usage once.
    assert result.usage_by_step == [HOP_1.usage, HOP_2_USAGE, HOP_3.usage]
    assert result.usage == {"total_input_tokens": 63, "total_output_tokens": 230}
    assert records[2][:3] == (
        "GET",
        "/v1beta/interactions/v1_fake2",
        {"stream": "true", "last_event_id": "v1_fake2-e3"},
    )
    hop = {"model": "gemini-3.8-flash", "stream": True}
    assert [sent[0], sent[1], sent[3]] == [
        {**hop, "input": INPUT},
        {**hop, "previous_interaction_id": "v1_fake1", "continuation_token": "tok-1"},
        {**hop, "previous_interaction_id": "v1_fake2", "continuation_token": "tok-2"},
    ]
    phases = [phase for phase, _ in lifecycle(events)]
    assert phases == ["continuation", "stream-resume", "continuation"]
    resume = lifecycle(events)[1][1] or ""
    assert resume.startswith("resume 1 of 3 after CONNECTION: connection failed after ")
    assert step_ends(events) == [("completed", "answer")]
    assert result.contents[-1]["parts"] == [{"text": ANSWER_TEXT}]


async def test_l59_done_when_stateless_three_hops_one_dropped_after_a_checkpoint() -> None:
    events: list[Any] = []
    resumed = InteractionTurn(
        text_step(0, "(cont.) "),
        status="requires_continuation",
        continuation_token="tok-2",
        usage=HOP_2_USAGE,
    )
    script = [HOP_1, HOP_2_DROPPED, resumed, HOP_3]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, config={"store": False}, on_event=events.append)
        sent = bodies(server)
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.COMPLETED,
        "stop",
        "completed",
    )
    assert (result.text, result.hops) == ("Chapter 1. Chapter 2. (cont.) Chapter 3.", 2)
    # The dropped hop reported no usage; the resumed one has hop 2's.
    assert result.usage_by_step == [HOP_1.usage, {}, HOP_2_USAGE, HOP_3.usage]
    assert result.usage == {"total_input_tokens": 63, "total_output_tokens": 230}
    hop = {"model": "gemini-3.8-flash", "store": False, "input": INPUT, "stream": True}
    tokens = [None, "tok-1", "ck-2", "tok-2"]
    assert sent == [{**hop, **({"continuation_token": t} if t else {})} for t in tokens]
    phases = [phase for phase, _ in lifecycle(events)]
    assert phases == ["continuation", "continuation-resume", "continuation"]
    assert [d for _, d in lifecycle(events)][::2] == [
        "the answer continues in hop 2 of step 1",
        "the answer continues in hop 3 of step 1",
    ]


# -- an error event in a hop (L64) -----------------------------------------------------


def failing_hop(*events: dict[str, Any]) -> InteractionTurn:
    return InteractionTurn(
        [*events, error_event("unavailable", "The model is overloaded.")],
        status="failed",
        usage={"total_input_tokens": 21, "total_output_tokens": 1},
    )


async def test_l64_error_event_after_visible_hops_ends_the_turn_with_their_text() -> None:
    events: list[Any] = []
    script = [HOP_1, failing_hop(*output_start(0, "Chapter 2"))]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST_RETRY, on_event=events.append)
        sent = len(bodies(server))
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.PROVIDER_ERROR,
        "error",
        "failed",
    )
    assert result.error is not None
    assert (result.error.status, result.error.code) == (503, "UNAVAILABLE")
    assert result.text == f"Chapter 1. Chapter 2\n\n{result.message}"
    assert result.message == (
        "The model service failed (503 UNAVAILABLE in the response stream). Please try again."
    )
    assert (result.hops, sent, result.contents) == (1, 2, USER)
    assert result.usage == {"total_input_tokens": 41, "total_output_tokens": 101}
    assert step_ends(events) == [("failed", "error")]


async def test_l64_error_event_in_a_hop_retries_the_step_from_its_first_request() -> None:
    events: list[Any] = []
    thinking = InteractionTurn(
        thought_step(0, "c2lnMQ==", "Planning the chapters"),
        status="requires_continuation",
        continuation_token="tok-1",
    )
    whole = InteractionTurn(text_step(0, "The whole answer."))
    script = [thinking, failing_hop(), whole]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST_RETRY, on_event=events.append)
        sent = bodies(server)
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "stop",
        "The whole answer.",
    )
    assert (result.hops, result.retries["provider"]) == (1, 1)
    assert [b.get("continuation_token") for b in sent] == [None, "tok-1", None]
    assert sent[2] == sent[0]  # L64: the retry is the step's own request, not a hop
    assert lifecycle(events) == [
        ("continuation", "the answer continues in hop 2 of step 1"),
        ("provider-retry", "503 UNAVAILABLE: The model is overloaded."),
    ]
    assert step_ends(events) == [("failed", "error"), ("completed", "answer")]
    assert result.contents[-1]["parts"] == [{"text": "The whole answer."}]


# -- a missing [DONE] (I28) ------------------------------------------------------------


async def test_i28_missing_done_after_completed_hops_is_no_fault() -> None:
    events: list[Any] = []
    hop_1 = InteractionTurn(
        text_step(0, "Chapter 1. "),
        status="requires_continuation",
        continuation_token="tok-1",
        send_done=False,
    )
    hop_2 = InteractionTurn(text_step(0, "Chapter 2."), send_done=False)
    async with FakeGemini([], interactions=[hop_1, hop_2]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = len(bodies(server))
    assert (result.stop_reason, result.finish_reason, result.text, result.hops, sent) == (
        StopReason.COMPLETED,
        "stop",
        "Chapter 1. Chapter 2.",
        1,
        2,
    )
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 0}
    assert step_ends(events) == [("completed", "answer")]


async def test_i28_missing_done_and_completed_is_a_no_finish_step() -> None:
    events: list[Any] = []
    unfinished = InteractionTurn(text_step(0, "Chapter 1"), status=None, send_done=False)
    whole = InteractionTurn(text_step(0, "Chapter 1. The end."))
    async with FakeGemini([], interactions=[unfinished, whole]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = bodies(server)
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "stop",
        "Chapter 1. The end.",
    )
    assert (result.retries["no-finish"], result.hops) == (1, 0)
    assert sent[1] == sent[0]
    assert lifecycle(events) == [("no-finish-retry", None)]
    assert step_ends(events) == [(None, "no-finish"), ("completed", "answer")]


# -- cut off before a resume (L63) -----------------------------------------------------


async def test_l63_abort_before_a_stored_resume_keeps_the_dropped_text() -> None:
    abort = asyncio.Event()
    events: list[Any] = []

    def sink(event: Any) -> None:
        events.append(event)
        if isinstance(event, Lifecycle) and event.phase == "stream-resume":
            abort.set()  # a synchronous handler: L60's check before the resume sees it

    dropped = InteractionTurn(text_step(0, "Chapter 1. ", "Chapter 2."), drop_after=3)
    async with FakeGemini([], interactions=[dropped]) as server, client(server) as model:
        result = await run_turn(model, USER, abort=abort, on_event=sink)
        methods = [r[0] for r in server.interactions.records]  # type: ignore[union-attr]
    assert (result.stop_reason, methods, result.hops) == (StopReason.ABORTED, ["POST"], 0)
    assert result.text == f"Chapter 1. \n\n{result.message}"
    assert (result.contents, result.usage_by_step) == (USER, [{}])
    assert step_ends(events) == [(None, "interrupted")]
