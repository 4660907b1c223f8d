"""Signatures across models and backends, end to end over loopback HTTP (addendum L33, S5).

The fake refuses signatures it never issued ("Corrupted thought signature."), as
the service does for a foreign one, and Gemini 3 demands one on the first call
of each current-turn step; the loop must make foreign history acceptable.
"""

from __future__ import annotations

from typing import Any

from fastagg.client import GeminiClient
from fastagg.events import Lifecycle
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.request import SENTINEL_SIGNATURE
from fastagg.signatures import Origin
from fastagg.testing import FakeGemini, call, chunk, final, signature, text

LIMITS = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0)
Q = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
FOREIGN = signature("issued by another model")
ANSWER = [chunk(text("Sunny.")), final(signature("answer"))]


def get_weather(city: str) -> dict[str, Any]:
    """Weather for a city."""
    return {"city": city, "sky": "sunny"}


def mid_turn(sig: str | None) -> list[dict[str, Any]]:
    """A turn another model began: its call, answered; the next request continues the turn."""
    return [
        Q,
        {
            "role": "model",
            "parts": [call("get_weather", {"city": "Paris"}, id="c1", signature=sig)],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "c1",
                        "name": "get_weather",
                        "response": {"output": {"sky": "sunny"}},
                    }
                }
            ],
        },
    ]


async def run(
    model_name: str, script: list[Any], contents: list[dict[str, Any]], **kwargs: Any
) -> tuple[Any, FakeGemini, list[Lifecycle]]:
    events: list[Lifecycle] = []

    def on_event(event: Any) -> None:
        if isinstance(event, Lifecycle):
            events.append(event)

    vertex = kwargs.pop("vertex", False)
    async with (
        FakeGemini(script) as server,
        GeminiClient(model_name, base_url=server.url, api_key="k", vertex=vertex) as model,
    ):
        result = await run_turn(
            model, contents, tools=[get_weather], limits=LIMITS, on_event=on_event, **kwargs
        )
    return result, server, events


async def test_l33_cross_model_history_is_stripped_and_sentinelled_and_accepted() -> None:
    result, server, events = await run(
        "gemini-3-flash-preview",
        [ANSWER],
        mid_turn(FOREIGN),
        history_origin=Origin("gemini-2.5-flash"),
    )
    assert result.stop_reason == StopReason.COMPLETED
    assert [r.status for r in server.records] == [200]
    sent = server.requests[0]["contents"][1]["parts"][0]
    assert sent == {
        "functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": SENTINEL_SIGNATURE,
    }
    assert result.signatures == {"stripped": 1, "sentinels": 1}
    assert [(e.phase, e.step, e.provider) for e in events] == [
        ("signature-strip", 0, "gemini"),
        ("signature-sentinel", 0, "gemini"),
    ]
    assert events[0].detail == (
        "removed 1 thought signature from contents[1]: issued by gemini-2.5-flash (Gemini API), "
        "which gemini-3-flash-preview (Gemini API) does not accept"
    )
    assert result.content_origins == [
        None,
        Origin("gemini-2.5-flash"),
        None,
        Origin("gemini-3-flash-preview"),
    ]


async def test_l33_gemini_api_history_sent_to_vertex_is_stripped() -> None:
    result, server, _ = await run(
        "gemini-3-flash-preview",
        [ANSWER],
        mid_turn(FOREIGN),
        history_origin=Origin("gemini-3-flash-preview", "gemini"),
        vertex=True,
    )
    assert result.stop_reason == StopReason.COMPLETED
    assert server.records[0].backend == "vertex"
    assert server.requests[0]["contents"][1]["parts"][0]["thoughtSignature"] == SENTINEL_SIGNATURE
    assert result.signatures == {"stripped": 1, "sentinels": 1}


async def test_l33_unknown_origin_is_sent_as_given_and_the_service_refusal_shows() -> None:
    result, server, events = await run("gemini-3-flash-preview", [ANSWER], mid_turn(FOREIGN))
    assert server.requests[0]["contents"] == mid_turn(FOREIGN)
    assert [r.status for r in server.records] == [400]
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.message == "Corrupted thought signature."
    assert result.signatures == {"stripped": 0, "sentinels": 0}
    assert [e.phase for e in events] == ["provider-error"]


async def test_l33_gemini_25_replay_keeps_its_own_signatures_and_needs_none_on_calls() -> None:
    """A Gemini 2.5 turn (signature on the first part, calls unsigned), then the next turn
    replays it to the same model: kept byte-exact, and the fake demands nothing (S5)."""
    sig25 = signature("gemini 2.5 first part")
    first = [
        [
            chunk(text("Let me check.", signature=sig25)),
            chunk(call("get_weather", {"city": "Paris"}), finish_reason="STOP"),
        ],
        ANSWER,
    ]
    one, server1, _ = await run("gemini-2.5-flash", first, [Q])
    assert one.stop_reason == StopReason.COMPLETED
    assert [r.status for r in server1.records] == [200, 200]
    follow_up = {"role": "user", "parts": [{"text": "And tomorrow?"}]}
    history = [*one.contents, follow_up]
    origins = [*one.content_origins, None]
    # The second server issued nothing, so it checks no signature; the 2.5 one must stay.
    async with (
        FakeGemini([ANSWER], check_signatures=False) as server2,
        GeminiClient("gemini-2.5-flash", base_url=server2.url, api_key="k") as model,
    ):
        two = await run_turn(model, history, history_origin=origins, limits=LIMITS)
    assert two.stop_reason == StopReason.COMPLETED
    assert server2.requests[0]["contents"] == history
    assert server2.requests[0]["contents"][1]["parts"][0] == {
        "text": "Let me check.",
        "thoughtSignature": sig25,
    }
    assert two.signatures == {"stripped": 0, "sentinels": 0}


async def test_l33_gemini_25_history_sent_to_gemini_3_mid_turn_gets_the_sentinel() -> None:
    """The 2.5 replay case across families: unsigned 2.5 calls in the current turn."""
    result, server, _ = await run(
        "gemini-3-flash-preview", [ANSWER], mid_turn(None), history_origin=Origin("gemini-2.5-pro")
    )
    assert result.stop_reason == StopReason.COMPLETED
    assert server.requests[0]["contents"][1]["parts"][0]["thoughtSignature"] == SENTINEL_SIGNATURE
    assert result.signatures == {"stripped": 0, "sentinels": 1}


async def test_l33_keep_policy_sends_foreign_signatures_as_given() -> None:
    result, server, _ = await run(
        "gemini-3-flash-preview",
        [ANSWER],
        mid_turn(FOREIGN),
        history_origin=Origin("gemini-2.5-flash"),
        signature_policy="keep",
    )
    assert server.requests[0]["contents"] == mid_turn(FOREIGN)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.signatures == {"stripped": 0, "sentinels": 0}


async def test_s1_exhausted_script_ends_the_turn_at_once_naming_the_script() -> None:
    async with (
        FakeGemini([], name="weather-turn.json") as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        result = await run_turn(model, [Q], limits=LIMITS)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert len(server.records) == 1
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 0}
    assert result.error is not None
    assert (result.error.status, result.error.code, result.error.retryable) == (
        400,
        "FAILED_PRECONDITION",
        False,
    )
    assert "the script 'weather-turn.json' is exhausted" in result.error.message
