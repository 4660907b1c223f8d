"""run_turn on the Interactions API and long decode on both formats, end to end over loopback
HTTP against FakeGemini (spec/interactions.md I22-I27, spec/turn-loop.md L56-L62)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg import GeminiClient
from fastagg.events import Lifecycle
from fastagg.limits import StopReason
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn, Step
from fastagg.testing.chunks import chunk, text, usage
from fastagg.testing.fake_interactions import (
    checkpoint_event,
    text_step,
)
from interactions_turns import ANSWER, CALLS, get_weather

USER = [{"role": "user", "parts": [{"text": "Weather in Paris and London?"}]}]


def client(server: FakeGemini, api: str = "interactions") -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, api=api)


async def test_i22_parallel_streamed_calls_then_stateful_follow_up() -> None:
    events: list[Any] = []
    async with FakeGemini([], interactions=[CALLS, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, tools=[get_weather], on_event=events.append)
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    assert (result.finish_reason, result.raw_finish_reason) == ("stop", "completed")
    assert result.tool_call_count == 2
    assert result.usage == {
        "total_input_tokens": 142,
        "total_output_tokens": 36,
        "total_tokens": 343,
    }
    follow = records[1][3]
    assert follow["previous_interaction_id"] == "v1_fake1"
    assert follow["input"] == [
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
    ]
    assert follow["tools"] == records[0][3]["tools"]  # I23: turn-scoped, re-sent
    paths = [(e.part, e.json_path, e.value) for e in events if type(e).__name__ == "ToolCallDelta"]
    assert paths == [
        (1, None, None),
        (1, "$.city", "Pa"),
        (1, "$.city", "ris"),
        (2, None, None),
        (2, "$.city", "Lon"),
        (2, "$.city", "don"),
    ]


async def test_i24_stateless_turn_resends_every_step() -> None:
    async with FakeGemini([], interactions=[CALLS, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, tools=[get_weather], config={"store": False})
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    second = records[1][3]
    assert "previous_interaction_id" not in second
    assert [s["type"] for s in second["input"]] == [
        "user_input",
        "thought",
        "function_call",
        "function_call",
        "function_result",
        "function_result",
    ]
    assert second["input"][1]["signature"] == "EqQBCqEBAY89a1=="
    assert second["input"][2]["arguments"] == {"city": "Paris"}


async def test_i26_dropped_stored_stream_resumed_from_last_event_id() -> None:
    dropped = InteractionTurn(ANSWER.events, usage=ANSWER.usage, drop_after=3)
    async with FakeGemini([], interactions=[dropped]) as server, client(server) as model:
        result = await run_turn(model, USER)
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    assert records[1][:3] == (
        "GET",
        "/v1beta/interactions/v1_fake1",
        {"stream": "true", "last_event_id": "v1_fake1-e2"},
    )


LONG = [
    InteractionTurn(
        [*text_step(0, "Chapter 1. "), checkpoint_event("tok-a")],
        status="requires_continuation",
        continuation_token="tok-1",
        usage={"total_input_tokens": 10, "total_output_tokens": 100},
    ),
    InteractionTurn(
        [
            {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
            {
                "event_type": "step.delta",
                "index": 0,
                "delta": {"type": "text", "text": "Chapter 2. "},
            },
            checkpoint_event("tok-b"),
            {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "lost"}},
        ],
        status=None,
        drop_after=4,
        usage=None,
    ),
    InteractionTurn(
        text_step(0, "Chapter 3."),
        usage={"total_input_tokens": 300, "total_output_tokens": 50},
    ),
]


async def test_l59_interactions_long_decode_stateless_three_hops_one_dropped() -> None:
    events: list[Any] = []
    async with FakeGemini([], interactions=LONG) as server, client(server) as model:
        result = await run_turn(model, USER, config={"store": False}, on_event=events.append)
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Chapter 1. Chapter 2. Chapter 3."
    assert result.hops == 1
    assert result.usage == {"total_input_tokens": 310, "total_output_tokens": 150}
    assert [r[3].get("continuation_token") for r in records] == [None, "tok-1", "tok-b"]
    assert all(r[3]["input"] == records[0][3]["input"] for r in records)
    phases = [e.phase for e in events if isinstance(e, Lifecycle)]
    assert phases == ["continuation", "continuation-resume"]


def hop(*chunks: dict[str, Any], drop_after: int | None = None) -> Step:
    return Step(chunks=list(chunks), drop_after=drop_after)


CLASSIC_LONG = [
    hop(
        chunk(text("# Chapter 1"), usage=usage(38, 6)),
        chunk(
            text(" ends."),
            finish_reason="CONTINUATION",
            continuation_token="Cp4-hop1",
            usage=usage(38, 61322, 4214),
        ),
    ),
    hop(
        chunk(text("\n\n# Chapter 10"), continuation_token="Cp4-ck", usage=usage(65574, 11)),
        chunk(text(" regenerated"), usage=usage(65574, 20)),
        drop_after=1,
    ),
    hop(
        chunk(
            text(" Coolant loops."),
            finish_reason="CONTINUATION",
            continuation_token="Cp4-hop2",
            usage=usage(65585, 100),
        ),
    ),
    hop(chunk(text(" Appendix C."), finish_reason="STOP", usage=usage(65700, 18840, 1032))),
]


async def test_l56_classic_long_decode_hops_with_a_drop_after_a_checkpoint() -> None:
    events: list[Any] = []
    async with FakeGemini(CLASSIC_LONG) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER, on_event=events.append)
        bodies = server.requests
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "# Chapter 1 ends.\n\n# Chapter 10 Coolant loops. Appendix C."
    assert (result.finish_reason, result.raw_finish_reason) == ("stop", "STOP")
    assert result.hops == 2
    assert [b.get("continuationToken") for b in bodies] == [None, "Cp4-hop1", "Cp4-ck", "Cp4-hop2"]
    assert all(b["contents"] == USER for b in bodies)
    assert result.contents[-1] == {
        "role": "model",
        "parts": [{"text": "# Chapter 1 ends.\n\n# Chapter 10 Coolant loops. Appendix C."}],
    }
    assert result.usage["promptTokenCount"] == 38 + 65574 + 65585 + 65700
    assert result.usage["candidatesTokenCount"] == 61322 + 11 + 100 + 18840
    phases = [e.phase for e in events if isinstance(e, Lifecycle)]
    assert phases == ["continuation", "continuation-resume", "continuation"]


async def test_l59_drop_without_a_token_is_a_truncation() -> None:
    script = [hop(chunk(text("cut")), chunk(text(" off")), drop_after=1)]
    async with FakeGemini(script) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER)
        sent = len(server.requests)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.kind == "connection"
    assert (sent, result.hops) == (1, 0)


async def test_l57_thinking_only_hop_is_not_a_no_finish_step() -> None:
    script = [
        hop(
            chunk(
                {"text": "planning", "thought": True},
                finish_reason="CONTINUATION",
                continuation_token="t1",
                usage=usage(5, 0, 900),
            )
        ),
        hop(chunk(text("Done."), finish_reason="STOP", usage=usage(6, 2))),
    ]
    async with FakeGemini(script) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER)
    assert (result.stop_reason, result.text, result.hops) == (StopReason.COMPLETED, "Done.", 1)
    assert result.retries["no-finish"] == 0
    assert result.contents[-1]["parts"] == [
        {"text": "planning", "thought": True},
        {"text": "Done."},
    ]


async def test_l56_continuation_without_a_token_is_length() -> None:
    script = [hop(chunk(text("partial"), finish_reason="CONTINUATION"))]
    async with FakeGemini(script) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER)
    assert (result.stop_reason, result.finish_reason, result.hops) == (
        StopReason.COMPLETED,
        "length",
        0,
    )


async def test_i22_a_vertex_project_turn_runs_on_its_interactions_path() -> None:
    credentials = pytest.importorskip("google.oauth2.credentials")
    async with FakeGemini([], interactions=[CALLS, ANSWER]) as server:
        model = GeminiClient(
            "gemini-3.8-flash",
            vertex=True,
            project="p",
            location="europe-west4",
            credentials=credentials.Credentials(token="tok-1"),
            base_url=server.url,
            api="interactions",
        )
        async with model:
            result = await run_turn(model, USER, tools=[get_weather])
        records = server.interactions.records  # type: ignore[union-attr]
    assert (result.stop_reason, result.text) == (
        StopReason.COMPLETED,
        "Paris: 18 C, clear. London: 12 C, rain.",
    )
    path = "/v1beta1/projects/p/locations/europe-west4/interactions"
    assert [(method, p) for method, p, _, _ in records] == [("POST", path), ("POST", path)]
    assert records[1][3]["previous_interaction_id"] == "v1_fake1"
