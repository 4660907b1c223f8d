"""Function-calling modes through the loop's requests: VALIDATED (and ANY with allowed names)
sent as the caller gave them, the step-cap request with tools off, on both APIs over loopback
(spec/turn-loop.md L121, L122; spec/interactions.md I38)."""

from __future__ import annotations

from typing import Any

from fastagg import GeminiClient
from fastagg.client.interactions_wire import request_body
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import FINAL_ANSWER_NOTE, run_turn
from fastagg.testing import FakeGemini, InteractionTurn, Step
from fastagg.testing.chunks import call, chunk, final, signature, text
from fastagg.testing.fake_interactions import arguments_step, text_step

USER = [{"role": "user", "parts": [{"text": "Find the fastest train to Lyon."}]}]
VALIDATED: dict[str, Any] = {
    "functionCallingConfig": {
        "mode": "VALIDATED",
        "allowedFunctionNames": ["lookup"],
        "streamFunctionCallArguments": True,
    }
}


def lookup(q: str) -> str:
    """Look a timetable up.

    Args:
        q: What to look up.
    """
    return f"found {q}"


def call_step(n: int) -> Step:
    part = call("lookup", {"q": f"train {n}"}, id=f"c{n}", signature=signature(f"s{n}"))
    return Step([chunk(part), final()])


async def test_l121_validated_mode_sent_verbatim_and_the_step_cap_request_turns_tools_off() -> None:
    script = [call_step(1), call_step(2), Step([chunk(text("The 7:04 TGV.")), final()])]
    async with (
        FakeGemini(script) as server,
        GeminiClient("gemini-3-flash-preview", api_key="k", base_url=server.url) as model,
    ):
        result = await run_turn(
            model,
            USER,
            tools=[lookup],
            config={"toolConfig": VALIDATED},
            limits=TurnLimits(max_steps=2),
        )
        bodies = server.requests
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.text == "The 7:04 TGV."
    assert [b["toolConfig"] for b in bodies[:2]] == [VALIDATED, VALIDATED]
    assert bodies[2]["toolConfig"] == {
        "functionCallingConfig": {"mode": "NONE", "streamFunctionCallArguments": True}
    }
    assert bodies[2]["contents"][-1] == {"role": "user", "parts": [{"text": FINAL_ANSWER_NOTE}]}
    assert VALIDATED["functionCallingConfig"]["mode"] == "VALIDATED"  # the caller's, unchanged


def test_i38_allowed_names_go_with_their_mode_as_allowed_tools() -> None:
    request = {"contents": USER, "toolConfig": VALIDATED}
    assert request_body(request)["generation_config"] == {
        "tool_choice": {"allowed_tools": {"mode": "validated", "tools": ["lookup"]}}
    }
    bare = {"contents": USER, "toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}}}
    assert request_body(bare)["generation_config"] == {"tool_choice": "validated"}
    off = {
        "contents": USER,
        "toolConfig": {"functionCallingConfig": {"mode": "NONE", "allowedFunctionNames": ["x"]}},
    }
    assert request_body(off)["generation_config"] == {"tool_choice": "none"}


def interactions_call(n: int) -> InteractionTurn:
    return InteractionTurn(
        arguments_step(0, f"c{n}", "lookup", '{"q": "train ', f'{n}"}}'),
        status="requires_action",
    )


async def test_l121_i38_validated_mode_on_interactions_and_its_step_cap_request() -> None:
    script = [interactions_call(1), interactions_call(2), InteractionTurn(text_step(0, "7:04."))]
    async with (
        FakeGemini([], interactions=script) as server,
        GeminiClient(
            "gemini-3-flash-preview", api_key="k", base_url=server.url, api="interactions"
        ) as model,
    ):
        result = await run_turn(
            model,
            USER,
            tools=[lookup],
            config={"toolConfig": VALIDATED},
            limits=TurnLimits(max_steps=2),
        )
        bodies = [r[3] for r in server.interactions.records]  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.text == "7:04."
    allowed = {"allowed_tools": {"mode": "validated", "tools": ["lookup"]}}
    assert [b["generation_config"]["tool_choice"] for b in bodies] == [allowed, allowed, "none"]


async def test_l122_step_cap_request_overrides_a_tool_choice_given_in_config() -> None:
    script = [interactions_call(1), InteractionTurn(text_step(0, "7:04."))]
    forced = {"allowed_tools": {"mode": "any", "tools": ["lookup"]}}
    async with (
        FakeGemini([], interactions=script) as server,
        GeminiClient(
            "gemini-3-flash-preview", api_key="k", base_url=server.url, api="interactions"
        ) as model,
    ):
        result = await run_turn(
            model,
            USER,
            tools=[lookup],
            config={"generation_config": {"tool_choice": forced, "temperature": 0.2}},
            limits=TurnLimits(max_steps=1),
        )
        bodies = [r[3] for r in server.interactions.records]  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.text == "7:04."
    assert bodies[0]["generation_config"] == {"tool_choice": forced, "temperature": 0.2}
    assert bodies[1]["generation_config"] == {"tool_choice": "none", "temperature": 0.2}
