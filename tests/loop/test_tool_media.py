"""Tools that return media (L101, L102) and the confirmation stop and resume (L103, L104)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from fastagg import InvalidRequestError, ToolMedia, ToolResult
from fastagg.client import GeminiClient
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import batch, run_turn
from fastagg.testing import FakeGemini, call, chunk, final, signature, text

LIMITS = TurnLimits(max_steps=3, turn_timeout=30, wrapup_lead=0)
Q = {"role": "user", "parts": [{"text": "Look at the chart."}]}
DONE = [chunk(text("Done.")), final()]
WAITING = {"decision": "require_confirmation", "explanation": "It sends an email."}


async def _run(tool: Any, **kwargs: Any) -> tuple[Any, FakeGemini]:
    step = [chunk(call(tool.__name__, None, id="t1", signature=signature("t"))), final()]
    async with (
        FakeGemini([step, DONE]) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        result = await run_turn(model, [Q], tools=[tool], limits=LIMITS, **kwargs)
    return result, server


def _answer(server: FakeGemini) -> Any:
    return server.requests[1]["contents"][2]["parts"][0]["functionResponse"]


async def test_l101_file_media_with_output_referring_to_it() -> None:
    def chart() -> ToolResult:
        """The sales chart."""
        return ToolResult(
            {"chart": {"$ref": "sales.pdf"}},
            [ToolMedia.file("gs://bucket/sales.pdf", "application/pdf", "sales.pdf")],
        )

    result, server = await _run(chart)
    assert result.stop_reason == StopReason.COMPLETED
    assert _answer(server) == {
        "id": "t1",
        "name": "chart",
        "response": {"output": {"chart": {"$ref": "sales.pdf"}}},
        "parts": [
            {
                "fileData": {
                    "mimeType": "application/pdf",
                    "fileUri": "gs://bucket/sales.pdf",
                    "displayName": "sales.pdf",
                }
            }
        ],
    }


async def test_l101_several_media_keep_their_order() -> None:
    def clips() -> ToolResult:
        """Two clips."""
        return ToolResult("two", [ToolMedia(b"a", "audio/wav"), ToolMedia(b"bb", "image/jpeg")])

    _, server = await _run(clips)
    assert _answer(server)["parts"] == [
        {"inlineData": {"mimeType": "audio/wav", "data": base64.b64encode(b"a").decode()}},
        {"inlineData": {"mimeType": "image/jpeg", "data": base64.b64encode(b"bb").decode()}},
    ]
    assert _answer(server)["response"] == {"output": "two"}


async def test_l101_media_that_is_not_tool_media_is_an_error_response() -> None:
    def wrong() -> ToolResult:
        """Wrong media."""
        return ToolResult("x", [b"raw bytes"])  # type: ignore[list-item]

    _, server = await _run(wrong)
    assert _answer(server) == {
        "id": "t1",
        "name": "wrong",
        "response": {
            "error": "wrong returned ToolResult media holding a bytes; each item must be a ToolMedia"
        },
    }


async def test_l102_inline_media_over_the_limit_is_answered_with_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batch, "MAX_INLINE_MEDIA", 2 * 2**20)

    def huge() -> ToolMedia:
        """A big image."""
        return ToolMedia(bytes(2 * 2**20), "image/png")

    _, server = await _run(huge)
    assert _answer(server) == {
        "id": "t1",
        "name": "huge",
        "response": {
            "error": "huge returned 2.7 MB of inline media (base64 encoded), more than the 2 MB "
            "a request may carry inline; it was not sent. Return smaller media, or upload the "
            "file (Files API, Cloud Storage) and return ToolMedia.file(uri, mime_type)"
        },
    }


def test_l102_the_limit_is_the_gemini_api_inline_limit() -> None:
    assert batch.MAX_INLINE_MEDIA == 100 * 2**20


def test_l101_tool_media_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match=r"either data .* or uri"):
        ToolMedia(None, "image/png")
    with pytest.raises(ValueError, match="either data"):
        ToolMedia(b"x", "image/png", uri="gs://b/x")
    with pytest.raises(TypeError, match="data must be bytes, not str"):
        ToolMedia("x", "image/png")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="IANA media type such as 'image/png', not 'png'"):
        ToolMedia(b"x", "png")
    assert ToolMedia(bytearray(b"x"), "image/png") == ToolMedia(b"x", "image/png")
    assert repr(ToolMedia(b"xy", "image/png", "a.png")) == (
        "ToolMedia(2 bytes, mime_type='image/png', display_name='a.png')"
    )


def _waiting(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    return [Q, {"role": "model", "parts": list(calls)}]


def _click(id: str | None) -> dict[str, Any]:
    return call("click_at", {"x": 1, "y": 2, "safety_decision": WAITING}, id=id)


async def _resume(contents: list[dict[str, Any]], **kwargs: Any) -> Any:
    async with GeminiClient("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k") as m:
        return await run_turn(m, contents, tools=[], limits=LIMITS, **kwargs)


async def test_l104_history_waiting_for_confirmation_needs_confirm() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await _resume(_waiting(_click("c1")))
    assert str(caught.value) == (
        "contents ends with 1 function call(s) waiting for the user's confirmation "
        "('click_at'); resume with run_turn(..., confirm=True) to allow them, "
        "confirm=False to refuse them, or confirm={call_id: bool}"
    )
    assert caught.value.where == "contents[1]"


async def test_l104_confirm_must_answer_each_waiting_id() -> None:
    with pytest.raises(ValueError) as caught:
        await _resume(_waiting(_click("c1")), confirm={"c2": True})
    assert str(caught.value) == (
        "confirm= must answer each call waiting for confirmation by its id ('c1'); "
        "missing: ['c1'], unknown: ['c2']"
    )
    with pytest.raises(ValueError, match="a call without an id can only be answered"):
        await _resume(_waiting(_click(None)), confirm={"c1": True})
    with pytest.raises(TypeError, match=r"confirm\['c1'\] must be True or False, not 1"):
        await _resume(_waiting(_click("c1")), confirm={"c1": 1})


async def test_l104_confirm_without_waiting_calls_is_refused() -> None:
    with pytest.raises(ValueError, match="does not end with function calls waiting"):
        await _resume([Q], confirm=True)
