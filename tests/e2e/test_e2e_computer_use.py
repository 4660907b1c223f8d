"""Computer use over loopback HTTP: a screenshot tool, a confirmation stop and its resume
(issue 41 items 3-4: L101, L103, L104)."""

from __future__ import annotations

import base64

from fastagg import ToolMedia, ToolResult
from fastagg.client import GeminiClient
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.loop.batch import REFUSED
from fastagg.testing import FakeGemini, call, chunk, final, signature, text

LIMITS = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0)
Q = {"role": "user", "parts": [{"text": "Buy the blue mug."}]}
#: a 1x1 PNG: what a browser screenshot tool would return
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
DECISION = {
    "decision": "require_confirmation",
    "explanation": "Clicking 'Place order' spends the user's money.",
}
CLICK = call(
    "click_at",
    {"x": 512, "y": 300, "safety_decision": DECISION},
    id="c1",
    signature=signature("click"),
)
STEP_1 = [chunk(text("I will place the order.")), chunk(CLICK), final()]
ANSWER = [chunk(text("The order is placed.")), final(signature("answer"))]
ANSWER_CONTENT = {
    "role": "model",
    "parts": [
        {"text": "The order is placed."},
        {"text": "", "thoughtSignature": signature("answer")},
    ],
}


class Browser:
    def __init__(self) -> None:
        self.clicks: list[tuple[int, int]] = []

    def click_at(self, x: int, y: int) -> ToolResult:
        """Click at a point of the screen.

        Args:
            x: column, 0-999.
            y: row, 0-999.
        """
        self.clicks.append((x, y))
        return ToolResult({"url": "https://shop.example/thanks"}, [ToolMedia(PNG, "image/png")])


async def test_l103_l104_screenshot_turn_stops_for_confirmation_and_resumes_confirmed() -> None:
    browser = Browser()
    async with (
        FakeGemini([STEP_1, ANSWER]) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        first = await run_turn(model, [Q], tools=[browser.click_at], limits=LIMITS)
        assert first.stop_reason == StopReason.NEEDS_CONFIRMATION
        assert browser.clicks == []
        assert first.pending_calls == [CLICK["functionCall"]]
        assert first.contents[-1] == {
            "role": "model",
            "parts": [{"text": "I will place the order."}, CLICK],
        }
        assert first.text == (
            "I will place the order.\n\nBefore I go on, please confirm: the model wants to run "
            "click_at (Clicking 'Place order' spends the user's money.). Resume with "
            "run_turn(..., confirm=True) to allow it or confirm=False to refuse it."
        )
        assert first.finish_reason is None
        assert first.tool_call_count == 0
        assert len(server.requests) == 1

        second = await run_turn(
            model, first.contents, tools=[browser.click_at], limits=LIMITS, confirm=True
        )
    assert second.stop_reason == StopReason.COMPLETED
    assert second.text == "The order is placed."
    assert browser.clicks == [(512, 300)]  # the safety decision is not the tool's argument
    assert second.tool_call_count == 1
    sent = server.requests[1]["contents"]
    assert sent[:2] == first.contents
    assert sent[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "c1",
                    "name": "click_at",
                    "response": {
                        "output": {"url": "https://shop.example/thanks"},
                        "safety_acknowledgement": "true",
                    },
                    "parts": [
                        {
                            "inlineData": {
                                "mimeType": "image/png",
                                "data": base64.b64encode(PNG).decode(),
                            }
                        }
                    ],
                }
            }
        ],
    }
    assert (
        base64.b64decode(sent[2]["parts"][0]["functionResponse"]["parts"][0]["inlineData"]["data"])
        == PNG
    )
    assert second.contents == [*sent, ANSWER_CONTENT]


async def test_l104_refused_call_is_answered_without_running_and_the_model_goes_on() -> None:
    browser = Browser()
    reply = [chunk(text("Understood, I did not order.")), final()]
    async with (
        FakeGemini([STEP_1, reply]) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        first = await run_turn(model, [Q], tools=[browser.click_at], limits=LIMITS)
        second = await run_turn(
            model, first.contents, tools=[browser.click_at], limits=LIMITS, confirm={"c1": False}
        )
    assert second.stop_reason == StopReason.COMPLETED
    assert second.text == "Understood, I did not order."
    assert browser.clicks == []
    assert second.tool_call_count == 0
    assert server.requests[1]["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "click_at", "response": {"error": REFUSED}}}
        ],
    }


async def test_l101_media_parts_are_sent_the_same_on_vertex() -> None:
    def screenshot() -> ToolMedia:
        """The screen as it is now."""
        return ToolMedia(PNG, "image/png", "screen.png")

    script = [
        [chunk(call("screenshot", None, id="s1", signature=signature("shot"))), final()],
        ANSWER,
    ]
    async with (
        FakeGemini(script) as server,
        GeminiClient(
            "gemini-3-flash-preview", base_url=server.url, api_key="k", vertex=True
        ) as model,
    ):
        result = await run_turn(model, [Q], tools=[screenshot], limits=LIMITS)
    assert result.stop_reason == StopReason.COMPLETED
    assert [r.backend for r in server.records] == ["vertex", "vertex"]
    part = server.requests[1]["contents"][2]["parts"][0]
    assert part == {
        "functionResponse": {
            "id": "s1",
            "name": "screenshot",
            "response": {"output": None},
            "parts": [
                {
                    "inlineData": {
                        "mimeType": "image/png",
                        "data": base64.b64encode(PNG).decode(),
                        "displayName": "screen.png",
                    }
                }
            ],
        }
    }
