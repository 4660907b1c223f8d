"""A real pydantic-ai Agent (streaming) against FakeGemini over loopback, with and without fastagg.

Runs in CI's google-genai 2.x venv (pydantic-ai pins google-genai<3); skipped
where pydantic-ai is not installed.
"""

from __future__ import annotations

from typing import Any

import pytest

from fastagg.testing import (
    AGENT_PROMPT,
    INTERLEAVED_ANSWER,
    INTERLEAVED_CALLS,
    STREAMED_ANSWER,
    STREAMED_CALLS,
    FakeGemini,
    interleaved_calls_scenario,
    streamed_args_scenario,
)
from fastagg.testing.scenarios import get_weather as weather_of

pytest.importorskip("pydantic_ai", reason="needs pydantic-ai (pip install 'fastagg[pydantic-ai]')")
pytest.importorskip("pydantic_ai.models.google", reason="needs pydantic-ai-slim[google]")
from google.genai import Client, types
from pydantic_ai import Agent
from pydantic_ai.models import google as pydantic_google
from pydantic_ai.providers.google import GoogleProvider

from fastagg.integrations import pydantic_ai as fastagg_pydantic_ai

MODEL = "gemini-3-flash-preview"
SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


async def run_agent(
    server: FakeGemini, model_class: type[Any], calls: list[tuple[str, dict[str, Any]]]
) -> str:
    """One streamed pydantic-ai run; the output text."""
    client = Client(
        vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
    )
    agent = Agent(model_class(MODEL, provider=GoogleProvider(client=client)))

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(("get_weather", {"city": city}))
        return weather_of(city)

    @agent.tool_plain
    def save_note(title: str, body: str) -> dict[str, Any]:
        """Save a short note for the user."""
        calls.append(("save_note", {"title": title, "body": body}))
        return {"saved": True, "title": title}

    async with agent.run_stream(AGENT_PROMPT) as run:
        return await run.get_output()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_y1_agent_with_fastagg_runs_full_calls_and_every_request_is_accepted(
    name: str,
) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        output = await run_agent(server, fastagg_pydantic_ai.GoogleModel, calls)
    assert sorted(calls) == sorted(expected_calls)
    assert output == answer
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    sent = server.requests[1]["contents"][1]["parts"]
    assert [p["functionCall"]["args"] for p in sent if "functionCall" in p] == [
        a for _, a in expected_calls
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_y1_agent_without_fastagg_runs_wrong_arguments(name: str) -> None:
    from pydantic_ai import __version__

    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    failure: Exception | None = None
    async with FakeGemini(scenario()) as server:
        try:
            output = await run_agent(server, pydantic_google.GoogleModel, calls)
        except Exception as exc:  # the framework's own failure, whatever form it takes
            failure, output = exc, ""
    rejected = [r.rejection for r in server.records if r.rejection]
    if sorted(calls) == sorted(expected_calls) and output == answer and not rejected:
        pytest.skip(f"pydantic-ai {__version__} handles the {name} scenario itself")
    assert sorted(calls) != sorted(expected_calls) or rejected or failure is not None


def test_y3_refuses_an_untested_pydantic_ai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastagg_pydantic_ai, "PYDANTIC_AI_VERSION", "9.0.0")
    with pytest.raises(RuntimeError, match=r"tested with pydantic-ai 2\.68\.x, not 9\.0\.0"):
        fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))


async def test_y2_whole_calls_keeps_other_parts_and_releases_calls_in_turn_order() -> None:
    from fastagg.testing import chunk, text, thought

    payloads = [
        chunk(thought("hm")),
        *interleaved_calls_scenario()[0].chunks[1:],
        chunk(text("after")),
    ]
    # Leave the weather call open at the end: it must come on a last chunk.
    payloads = [
        p
        for p in payloads
        if p["candidates"][0].get("content", {}).get("parts")
        != [{"functionCall": {"id": "fc_weather"}}]
    ]

    async def source() -> Any:
        for payload in payloads:
            yield types.GenerateContentResponse.model_validate(payload)

    out = [c async for c in fastagg_pydantic_ai.whole_calls(source())]
    parts = [
        p for c in out for cand in c.candidates or [] if cand.content for p in cand.content.parts
    ]
    assert [p.thought for p in parts if p.text] == [True, None]
    calls = [(p.function_call.id, p.function_call.args) for p in parts if p.function_call]
    assert calls == [
        ("fc_note", INTERLEAVED_CALLS[0][1]),
        ("fc_weather", INTERLEAVED_CALLS[1][1]),
    ]
    assert parts[1].thought_signature is not None  # the first call keeps the step's signature
    assert len(out) == len(payloads) + 1
