"""What the service sends today, through ``run_turn`` over loopback (spec/aggregation.md P14,
E18): a search-grounded step's server-side tool parts go back byte-exact, in place, and a
model's retirement notice is said once a turn."""

from __future__ import annotations

import base64
import json
from typing import Any

from fastagg.client import GeminiClient
from fastagg.events import Lifecycle
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.loop.messages import status_notice
from fastagg.testing import FakeGemini, call, chunk, final, signature, text, thought

LIMITS = TurnLimits(max_steps=4, turn_timeout=30, wrapup_lead=0)
Q = {"role": "user", "parts": [{"text": "Book a table in Lisbon if it is sunny."}]}
BIG = base64.b64encode(bytes((i * 131 + i // 256) % 256 for i in range(82_500))).decode()
TOOL_CALL = {
    "toolCall": {
        "id": "srv_1",
        "toolType": "GOOGLE_SEARCH_WEB",
        "args": {"queries": ["weather in Lisbon today"]},
    },
    "thoughtSignature": signature("search call"),
}
TOOL_RESPONSE = {
    "toolResponse": {
        "id": "srv_1",
        "toolType": "GOOGLE_SEARCH_WEB",
        "response": {"results": [{"title": "Lisbon", "snippet": "Sunny, 24\u00b0C"}]},
    },
    "thoughtSignature": BIG,
}
CODE = {"executableCode": {"id": "x1", "language": "PYTHON", "code": "print(24 > 20)"}}
CODE_RESULT = {"codeExecutionResult": {"id": "x1", "outcome": "OUTCOME_OK", "output": "True\n"}}
BOOK = call("book_table", {"city": "Lisbon"}, id="c1", signature=signature("book"))
DEPRECATED = {
    "modelStage": "DEPRECATED",
    "retirementTime": "2027-06-30T00:00:00Z",
    "message": "Move to gemini-3-flash.",
}


def book_table(city: str) -> dict[str, Any]:
    """Book a table for two."""
    return {"booked": city}


def with_status(c: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any]:
    return c if status is None else {**c, "modelStatus": status}


async def turn(script: list[Any], model: str = "gemini-3-flash-preview") -> Any:
    events: list[Lifecycle] = []

    def on_event(event: Any) -> None:
        if isinstance(event, Lifecycle):
            events.append(event)

    async with (
        FakeGemini(script) as server,
        GeminiClient(model, base_url=server.url, api_key="k") as client,
    ):
        result = await run_turn(client, [Q], tools=[book_table], limits=LIMITS, on_event=on_event)
    return result, server, events


async def test_p14_server_side_tool_parts_go_back_byte_exact_in_place_through_run_turn() -> None:
    grounded = [
        chunk(thought("Checking the weather.")),
        chunk(TOOL_CALL),
        chunk(TOOL_RESPONSE),
        chunk(CODE, CODE_RESULT),
        chunk(text("It is sunny; booking.")),
        chunk(BOOK),
        final(),
    ]
    result, server, _ = await turn([grounded, [chunk(text("Booked.")), final()]])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.text == "Booked."
    assert [r.status for r in server.records] == [200, 200]
    second = server.requests[1]["contents"]
    assert second[1] == {
        "role": "model",
        "parts": [
            {"text": "Checking the weather.", "thought": True},
            TOOL_CALL,
            TOOL_RESPONSE,
            CODE,
            CODE_RESULT,
            {"text": "It is sunny; booking."},
            BOOK,
        ],
    }
    assert second[2]["parts"] == [
        {
            "functionResponse": {
                "id": "c1",
                "name": "book_table",
                "response": {"output": {"booked": "Lisbon"}},
            }
        }
    ]
    # The 110 KB signature went back once, whole, on the toolResponse part and nowhere else.
    assert sum(json.dumps(c).count(BIG) for c in second) == 1
    assert second[1]["parts"][2]["thoughtSignature"] == BIG


async def test_e18_a_retirement_notice_is_said_once_a_turn_in_words() -> None:
    step = [
        with_status(chunk(call("book_table", {"city": "Lisbon"}, id="c1")), DEPRECATED),
        with_status(final(), DEPRECATED),
    ]
    answer = [with_status(chunk(text("Booked.")), DEPRECATED), final()]
    result, _, events = await turn([step, answer], model="gemini-2.5-flash")
    assert result.stop_reason == StopReason.COMPLETED
    said = [(e.phase, e.step, e.detail) for e in events if e.phase == "model-status"]
    assert said == [
        (
            "model-status",
            1,
            "gemini-2.5-flash is deprecated and retires on 2027-06-30: Move to gemini-3-flash.",
        )
    ]


async def test_e18_a_stable_model_says_nothing() -> None:
    stable = {"modelStage": "STABLE", "message": "Generally available."}
    answer = [with_status(chunk(text("Hi.")), stable), final()]
    _, _, events = await turn([answer], model="gemini-2.5-flash")
    assert [e.phase for e in events if e.phase == "model-status"] == []


def test_e18_notices_name_the_stage_and_the_date() -> None:
    assert status_notice(
        {"modelStage": "RETIRED", "retirementTime": "2026-01-15T00:00:00Z"}, "m"
    ) == ("m is retired and retired on 2026-01-15")
    assert status_notice({"modelStage": "LEGACY"}, "m") == (
        "m is a legacy model, on the path to deprecation"
    )
    assert status_notice({"retirementTime": "2027-06-30T00:00:00Z", "message": " x "}, None) == (
        "the model retires on 2027-06-30: x"
    )
    assert status_notice({"modelStage": "PREVIEW"}, "m") is None
    assert status_notice(None, "m") is None
