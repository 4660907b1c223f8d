"""A cut-off streamed call is never run (turn-loop addendum L32), end to end over loopback HTTP."""

from __future__ import annotations

from typing import Any

from fastagg.client import GeminiClient
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import MALFORMED_NOTE, run_turn
from fastagg.testing import FakeGemini, chunk, final, signature, streamed_call, text

USER = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
FAST = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0, retry_backoff=0.01)
CITY = "Paris, Ile-de-France"


def weather_tool(seen: list[str]) -> Any:
    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        seen.append(city)
        return {"city": city, "sky": "sunny"}

    return get_weather


def cut_off(sig: str) -> list[dict[str, Any]]:
    """A streamed call whose stream ends mid-argument: no end marker, no finish reason."""
    return streamed_call("get_weather", {"city": CITY}, id="c1", signature=sig, piece=15)[:-2]


def whole(sig: str) -> list[dict[str, Any]]:
    return [*streamed_call("get_weather", {"city": CITY}, id="c1", signature=sig), final()]


ANSWER = [chunk(text("Sunny in Paris.")), final(signature("answer"))]


async def turn(script: list[Any], limits: TurnLimits = FAST) -> tuple[Any, FakeGemini, list[str]]:
    seen: list[str] = []
    async with (
        FakeGemini(script) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        result = await run_turn(model, [USER], tools=[weather_tool(seen)], limits=limits)
    return result, server, seen


async def test_l32_cut_off_call_is_never_executed_and_the_step_is_retried() -> None:
    result, server, seen = await turn([cut_off(signature("s1")), whole(signature("s2")), ANSWER])
    assert seen == [CITY]  # run once, with the whole argument
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["no-finish"] == 1
    assert result.tool_call_count == 1
    # the retry resent the same history: the cut-off output was never appended
    assert server.requests[1]["contents"] == [USER]
    assert server.requests[2]["contents"][1]["parts"][0]["functionCall"]["args"] == {"city": CITY}


async def test_l32_cut_off_call_every_attempt_ends_as_provider_error_without_running() -> None:
    limits = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0, no_finish_retries=1)
    result, server, seen = await turn([cut_off(signature("a")), cut_off(signature("b"))], limits)
    assert seen == []
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None
    assert (result.error.kind, result.error.code) == ("no-finish-reason", "NO_FINISH_REASON")
    assert len(server.requests) == 2
    assert result.contents == [USER]


async def test_l32_unfinished_call_with_a_finish_reason_is_a_malformed_step() -> None:
    stopped = [*cut_off(signature("s1")), final(finish_reason="MAX_TOKENS")]
    result, server, seen = await turn([stopped, whole(signature("s2")), ANSWER])
    assert seen == [CITY]
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["malformed"] == 1
    assert server.requests[1]["contents"] == [
        USER,
        {"role": "user", "parts": [{"text": MALFORMED_NOTE}]},
    ]


async def test_l32_persisting_unfinished_calls_name_the_cause() -> None:
    stopped = [*cut_off(signature("s1")), final(finish_reason="STOP")]
    limits = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0, malformed_retries=1)
    result, _, seen = await turn([stopped, stopped], limits)
    assert seen == []
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None
    assert (result.error.kind, result.error.code) == ("malformed", "UNFINISHED_FUNCTION_CALL")
    assert result.message == (
        "The model service failed (the model sent an unfinished function call 2 times). "
        "Please try again."
    )
